// PiconetDiscovery — see Package.swift for the layer picture.
