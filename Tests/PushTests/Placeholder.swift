import Testing
@Test func placeholderPushTests() {}
