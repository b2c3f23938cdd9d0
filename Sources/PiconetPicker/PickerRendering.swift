import PiconetWire

extension PickerModel {
    /// The screen for a terminal `width` columns wide with `height` rows to spare: a header, one
    /// row per device (`> 1  node-1  board pi5  role node`, `>` on the selection), a key hint.
    ///
    /// Every line fits `width` (cut with `…`; a character counts as one column, so a wide one
    /// may overflow a line it ends). Names from the network are escaped (TerminalText) before they
    /// are measured. When the devices do not fit, the rows shown are a window that holds the
    /// selection and the header says which. Plain text: the terminal side adds only the cursor
    /// movements.
    public func render(width: Int, height: Int) -> [String] {
        let width = max(width, 8)
        let rowsFree = max(height - 2, 1)
        var header = "Devices offering \"\(TerminalText.escaped(filter.service))\""
        var only: [String] = []
        if let b = filter.board { only.append("board \(TerminalText.escaped(b))") }
        if let r = filter.role { only.append("role \(TerminalText.escaped(r))") }
        if !only.isEmpty { header += " (\(only.joined(separator: ", ")))" }
        var lines: [String] = []
        var rows: [String] = []
        if devices.isEmpty {
            header += ": none yet, browsing…"
        } else {
            let first = Self.windowStart(count: devices.count, rows: rowsFree, selected: selectedIndex ?? 0)
            let last = min(first + rowsFree, devices.count)
            header += devices.count == 1 ? ": 1 device" : ": \(devices.count) devices"
            if last - first < devices.count { header += ", \(first + 1)-\(last) shown" }
            let digits = String(devices.count).count
            let names = devices[first..<last].map { TerminalText.escaped($0.name) }
            let nameWidth = min(names.map(\.count).max() ?? 0, 32)
            let selected = selectedIndex
            for (offset, name) in names.enumerated() {
                let i = first + offset, d = devices[i]
                let number = String(i + 1)
                rows.append((i == selected ? "> " : "  ")
                            + String(repeating: " ", count: digits - number.count) + number + "  "
                            + name + String(repeating: " ", count: max(nameWidth - name.count, 0))
                            + "  board " + TerminalText.escaped(d.board ?? "-")
                            + "  role " + TerminalText.escaped(d.role ?? "-"))
            }
        }
        if refused > 0 { header += " (\(refused) more not listed: list full)" }
        lines.append(header)
        lines += rows
        lines.append("↑/↓ or j/k move, Enter or 1-9 picks, q or Esc cancels")
        return lines.map { Self.fit($0, width) }
    }

    /// The first row shown: the selection stays in view, as near the middle as the ends allow.
    static func windowStart(count: Int, rows: Int, selected: Int) -> Int {
        guard count > rows else { return 0 }
        return min(max(selected - rows / 2, 0), count - rows)
    }

    /// `line` cut to `width` characters, the last one `…` when something was cut.
    static func fit(_ line: String, _ width: Int) -> String {
        guard line.count > width else { return line }
        return String(line.prefix(width - 1)) + "…"
    }
}
