import ScenarioCommand
import Scenarios

EventNotifyCommand.main([AvailabilityChange(), NewAssignment(), Milestone(), Honorarium()])
