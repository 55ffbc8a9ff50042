enum FakePushPlaceholder {}
