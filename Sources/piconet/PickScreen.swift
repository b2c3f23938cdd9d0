import PiconetLoop
import PiconetPicker
import PiconetPosix

/// `piconet pick`'s list on a terminal: standard input in raw mode for the keys, the lines
/// `PickerModel.render` gives drawn on standard error (standard output is the service's alone),
/// drawn again in place on every change and on SIGWINCH.
///
/// `finish()` erases the list, shows the cursor and puts the terminal back; it runs on a pick,
/// a cancel, a signal and (from `deinit`) on an error, and may run more than once.
final class PickScreen {
    let loop: EpollLoop
    private(set) var model: PickerModel
    private var decoder = PickerKeyDecoder()
    private let terminal: RawTerminal
    private var registration: Registration?
    private var escapeTimer: TimerID?
    /// Lines on the screen now (the cursor is at the end of the last).
    private var drawn = 0
    private var finished = false
    /// The outcome, once: the caller leaves the list there and carries it out.
    var onOutcome: (PickerModel.Outcome) -> Void = { _ in }

    /// Puts the terminal in raw mode and watches standard input. Throws when standard input is
    /// no terminal (the caller checked) or the loop refuses it.
    init(loop: EpollLoop, filter: PickerFilter, capacity: Int) throws(IOError) {
        self.loop = loop
        self.model = PickerModel(filter: filter, capacity: capacity)
        terminal = try RawTerminal()
        do {
            registration = try loop.register(FileDescriptor(rawValue: 0), interest: .read) { [unowned self] _ in self.readable() }
        } catch {
            terminal.restore()
            throw error
        }
        Console.err("\u{1B}[?25l")  // no cursor blinking over the list
        draw()
    }

    deinit { finish() }

    func found(_ device: PickerDevice) { if model.found(device) { draw() } }
    func lost(_ name: String) { if model.lost(name) { draw() } }
    func resized() { draw() }

    /// Cancels (a signal): the same as q.
    func cancel() {
        model.press(.cancel)
        settle()
    }

    /// The list erased, the cursor shown, the terminal as it was, standard input no longer watched.
    func finish() {
        guard !finished else { return }
        finished = true
        if let registration { loop.deregister(registration) }
        registration = nil
        if let escapeTimer { loop.cancel(escapeTimer) }
        escapeTimer = nil
        Console.err(eraseSequence + "\u{1B}[?25h")
        drawn = 0
        terminal.restore()
    }

    private func readable() {
        let bytes: [UInt8]
        switch try? Console.readInput(maximum: 256) {
        case .wouldBlock?: return
        case let .processed(b)? where !b.isEmpty: bytes = b
        default:
            // The terminal went away (end of input): nobody can pick.
            model.press(.cancel)
            return settle()
        }
        let keys = decoder.feed(bytes, at: loop.now)
        armEscapeTimer()
        press(keys)
    }

    /// A lone ESC waits `escapeWait` for the rest of a sequence; the timer ends the wait.
    private func armEscapeTimer() {
        if let escapeTimer { loop.cancel(escapeTimer) }
        escapeTimer = nil
        guard let deadline = decoder.nextDeadline else { return }
        escapeTimer = loop.schedule(at: deadline) { [unowned self] in
            self.escapeTimer = nil
            self.press(self.decoder.timerFired(at: self.loop.now))
        }
    }

    private func press(_ keys: [PickerKey]) {
        var changed = false
        for key in keys {
            if model.press(key) { changed = true }
        }
        if changed { settle() }
    }

    private func settle() {
        guard let outcome = model.outcome else { return draw() }
        finish()
        onOutcome(outcome)
    }

    /// Back to the first line drawn, and everything from there down cleared.
    private var eraseSequence: String {
        guard drawn > 0 else { return "" }
        return (drawn > 1 ? "\u{1B}[\(drawn - 1)A" : "") + "\r\u{1B}[J"
    }

    private func draw() {
        guard !finished else { return }
        let size = RawTerminal.size(of: FileDescriptor(rawValue: 2)) ?? (rows: 24, columns: 80)
        // One column and one row spare: a line exactly as wide as the terminal, or a list as
        // tall, would wrap or scroll and the cursor would no longer be where `drawn` says.
        let lines = model.render(width: size.columns - 1, height: size.rows - 1)
        Console.err(eraseSequence + lines.joined(separator: "\r\n"))
        drawn = lines.count
    }
}
