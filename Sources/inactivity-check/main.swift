import ScenarioCommand
import Scenarios

ScenarioCommand.main(InactivityCheck())
