import Foundation

/// A rule every scenario obeys without a line of its own: the organization's switch, the user's master
/// and category switches, channels, critical categories, quiet hours and the daily cap. Policies run
/// in order: `screen` before the scenario decides (the first suppression wins), `shape` after it
/// decided to notify (a policy may change the draft, or suppress it).
public protocol Policy: Sendable {
    /// The reasons this policy may suppress with, in the order summaries list them.
    var reasons: [SuppressionReason] { get }
    /// Before the scenario decides: nil lets the candidate through.
    func screen(_ candidate: PolicyContext) -> Suppression?
    /// After the scenario decided to notify: nil keeps the (possibly changed) draft.
    func shape(_ draft: inout NotificationDraft, _ candidate: PolicyContext) -> Suppression?
}

extension Policy {
    public func screen(_ candidate: PolicyContext) -> Suppression? { nil }
    public func shape(_ draft: inout NotificationDraft, _ candidate: PolicyContext) -> Suppression? { nil }
}

/// What a policy knows of one candidate.
public struct PolicyContext: Sendable {
    public var scenario: String
    public var category: NotificationCategory
    public var recipient: Recipient
    public var organizationName: String
    /// The organization's switch for this scenario.
    public var scenarioEnabled: Bool
    /// The scenario's priority for the user's daily slots (1 comes first): the organization's, else the default.
    public var priority: Int
    public var now: Date
}

/// A policy's (or a scenario's) reason not to notify, with a detail for people.
public struct Suppression: Sendable {
    public var reason: SuppressionReason
    public var detail: String
    public init(_ reason: SuppressionReason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
}

extension SuppressionReason {
    public static let organizationScenarioOff = SuppressionReason("organization_scenario_off")
    public static let pushDisabled = SuppressionReason("push_disabled")
    public static let categoryDisabled = SuppressionReason("category_disabled")
}

/// The policies every scenario runs through, in order.
public enum Policies {
    public static let standard: [any Policy] = [OrganizationSwitch(), MasterSwitch(), CategorySwitch(), Channels(), CriticalCategories(),
                                                QuietHours(), DailyCap()]
}

/// An organization that turned the scenario off: nobody in it is told, whatever their preferences.
public struct OrganizationSwitch: Policy {
    public var reasons: [SuppressionReason] { [.organizationScenarioOff] }
    public func screen(_ c: PolicyContext) -> Suppression? {
        c.scenarioEnabled ? nil : Suppression(.organizationScenarioOff, "\(c.organizationName) has turned \(c.scenario) off")
    }
}

/// The user's master switch: off means no notification of any category (no inbox row either).
public struct MasterSwitch: Policy {
    public var reasons: [SuppressionReason] { [.pushDisabled] }
    public func screen(_ c: PolicyContext) -> Suppression? {
        c.recipient.pushEnabled ? nil : Suppression(.pushDisabled, "the user's notification master switch is off")
    }
}

/// The user's switch for the scenario's category; a category the organization marks critical goes through
/// it (the master switch, before it, still rules).
public struct CategorySwitch: Policy {
    public var reasons: [SuppressionReason] { [.categoryDisabled] }
    public func screen(_ c: PolicyContext) -> Suppression? {
        c.recipient.categoryEnabled || c.recipient.criticalCategory
            ? nil : Suppression(.categoryDisabled, "the user has turned \(c.category.rawValue) notifications off")
    }
}

/// A category the organization marks critical: pushed with the platforms' time-sensitive presentation,
/// and through quiet hours (`QuietHours` leaves a critical draft alone).
public struct CriticalCategories: Policy {
    public var reasons: [SuppressionReason] { [] }
    public func shape(_ draft: inout NotificationDraft, _ c: PolicyContext) -> Suppression? {
        if c.recipient.criticalCategory { draft.critical = true }
        return nil
    }
}
