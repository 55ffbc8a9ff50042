import ScenarioCommand
import Scenarios

ScenarioCommand.main(ImpactSummary())
