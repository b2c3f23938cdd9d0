import ArgumentParser

/// Subcommands of `piconet` from this area; filled in by its layer.
let discoveryCommands: [ParsableCommand.Type] = []
