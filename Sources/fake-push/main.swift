print("fake-push")
