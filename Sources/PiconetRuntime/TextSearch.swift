/// Substring search for the command-line and config texts.
///
/// `String.contains(_: String)` and `firstRange(of:)` come from _StringProcessing, which
/// Embedded Swift (the node's build) does not have; these few lines serve both modes.
/// Compares by `Character`, as those do; the texts are short (flags, file names, messages).
extension StringProtocol {
    /// The first occurrence of `needle`, nil when there is none (an empty needle is at the start).
    func firstTextRange(of needle: some StringProtocol) -> Range<Index>? {
        guard !needle.isEmpty else { return startIndex..<startIndex }
        var i = startIndex
        while i < endIndex {
            if self[i...].hasPrefix(needle) { return i..<index(i, offsetBy: needle.count) }
            formIndex(after: &i)
        }
        return nil
    }

    /// Whether `needle` occurs in this text.
    func containsText(_ needle: some StringProtocol) -> Bool { firstTextRange(of: needle) != nil }
}
