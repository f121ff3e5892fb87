// Each test process: the SDK's INFO logs (worker state changes, bundle stats) drown test output.
import { DefaultLogger, Runtime } from '@temporalio/worker';

Runtime.install({ logger: new DefaultLogger('WARN') });
