import ScenarioCommand
import Scenarios

RulesCommand.main([InactivityCheck(), AssignmentFollowUp(), OverdueDigest(), ImpactSummary(),
                   AvailabilityChange(), NewAssignment(), Milestone(), Honorarium()])
