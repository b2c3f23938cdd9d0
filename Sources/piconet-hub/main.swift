print("piconet-hub: not built yet")
