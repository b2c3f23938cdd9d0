print("piconet: not built yet")
