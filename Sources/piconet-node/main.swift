print("piconet-node: not built yet")
