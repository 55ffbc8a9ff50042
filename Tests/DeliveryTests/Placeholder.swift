import Testing
@Test func placeholderDeliveryTests() {}
