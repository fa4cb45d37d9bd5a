/** The feature modules of the pipeline and its surfaces, in one list so adding one is a one-line change. */
import { PipelineModule } from './pipeline.module.js';

export const ToolGatewayModules = [PipelineModule];
