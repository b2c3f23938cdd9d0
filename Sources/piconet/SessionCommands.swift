import ArgumentParser

/// Subcommands of `piconet` from this area; filled in by its layer.
let sessionCommands: [ParsableCommand.Type] = []
