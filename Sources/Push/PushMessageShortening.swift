extension PushMessage {
    /// This message with its body, then its title, shortened at a character boundary (never inside an emoji)
    /// and ended with "…", each only as far as needed, until `fits` accepts it; `fits` is false in the result
    /// when even that was not enough (the custom data alone is too big).
    func shortened(toFit fits: (PushMessage) -> Bool) -> (message: PushMessage, fits: Bool) {
        var shortened = self
        for field in [\PushMessage.body, \PushMessage.title] {
            let characters = Array(shortened[keyPath: field])
            var low = 0, high = characters.count
            while low < high {
                let mid = (low + high + 1) / 2
                var candidate = shortened
                candidate[keyPath: field] = String(characters[..<mid]) + "…"
                if fits(candidate) { low = mid } else { high = mid - 1 }
            }
            shortened[keyPath: field] = low == characters.count ? String(characters) : String(characters[..<low]) + "…"
            if fits(shortened) { return (shortened, true) }
        }
        return (shortened, false)
    }
}
