import Foundation
import PiconetHubServer

extension HubApp {
    /// `--json`: the snapshot `/api/nodes` serves, as one line, without the per-node series
    /// (up to 600 points each: those stay on `/api/nodes/{id}/series`).
    static func jsonLine(_ snapshot: HubSnapshot) -> String {
        var s = snapshot
        for i in s.nodes.indices { s.nodes[i].series = [] }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(s) else { return "{\"error\":\"snapshot not encodable\"}\n" }
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}
