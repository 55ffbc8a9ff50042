enum DeliveryPlaceholder {}
