import ScenarioCommand
import Scenarios

ScenarioCommand.main(AssignmentFollowUp())
