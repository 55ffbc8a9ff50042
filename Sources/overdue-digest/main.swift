import ScenarioCommand
import Scenarios

ScenarioCommand.main(OverdueDigest())
