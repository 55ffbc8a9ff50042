import Testing
@Test func placeholderFakePushTests() {}
