print("push-deliver")
