import Foundation
import Hummingbird
import PiconetHub
@testable import PiconetHubServer
import Testing

/// Nodes in one stable order everywhere, with the profile and board shown.
@Suite struct NodeOrderTests {
    func node(_ id: String, _ name: String, profile: String? = nil, board: String? = nil) -> NodeStatus {
        NodeStatus(id: id, name: name, state: "connected", profile: profile, board: board)
    }

    @Test func snapshotKeepsNodesByNameThenIdWhateverOrderTheyCameIn() {
        let given = [node("cc", "wearable-2"), node("bb", "wearable-1"), node("aa", "wearable-1"), node("00", "Zed")]
        let snap = HubSnapshot(generatedAt: 0, hub: HubInfo(), nodes: given)
        #expect(snap.nodes.map(\.id) == ["00", "aa", "bb", "cc"])
        // Any permutation gives the same order.
        let again = HubSnapshot(generatedAt: 0, hub: HubInfo(), nodes: given.reversed())
        #expect(again.nodes == snap.nodes)
    }

    @Test func apiNodesListsThemInThatOrderWithProfileAndBoard() async throws {
        let feed = HubFeed()
        feed.publish(HubSnapshot(generatedAt: 0, hub: HubInfo(), nodes: [
            node("b2", "wearable-3", profile: "walking", board: "none"),
            node("a1", "wearable-1", profile: "workout", board: "pi4b"),
            node("c3", "wearable-2"),
        ]))
        try await Application(router: HubHTTPServer(feed: feed).makeRouter()).test(.router) { client in
            try await client.execute(uri: "/api/nodes", method: .get) { response in
                let json = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [[String: Any]])
                #expect(json.map { $0["name"] as? String } == ["wearable-1", "wearable-2", "wearable-3"])
                #expect(json[0]["profile"] as? String == "workout" && json[0]["board"] as? String == "pi4b")
                #expect(json[1]["profile"] == nil || json[1]["profile"] is NSNull, "unknown profile is null or absent")
                #expect(json[2]["profile"] as? String == "walking")
            }
        }
    }

    @Test func livePageDrawsTimeAndValueAxesAndShowsTheProfile() {
        let page = LivePage.template
        // Both plots go through one plot() that draws a value axis with numbers and the unit,
        // and a time axis labelled in seconds before the newest point.
        #expect(page.contains(#""bpm", null, null, "bpm""#))
        #expect(page.contains(#""activity", 0, 800, "mg""#))
        #expect(page.contains(#"i === 6 ? "now" : `-${ago.toFixed(0)} s`"#))
        #expect(page.contains("g.fillText(v.toFixed(0), x0 - 4, y)"), "every value tick is labelled")
        #expect(page.contains("simulated profile: ${n.profile"))
        #expect(page.contains("sort(byNameThenId)"))
        // A node's update line: its words are the node's, so they are set as text, never as HTML.
        #expect(page.contains("update(el, n.update)") && page.contains("box.append(t)"))
        #expect(page.contains("${u.percent}% (") && page.contains("<progress") == false)
    }
}
