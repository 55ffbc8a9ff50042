enum PushPlaceholder {}
