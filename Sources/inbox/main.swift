print("inbox")
