// MemoryMxThrottle against the MxThrottle conformance suite.

import t from 'tap';
import { MemoryMxThrottle } from '../src/throttle.ts';
import { mxThrottleConformance } from '../../../test/helpers/mx-throttle-conformance.ts';

mxThrottleConformance(t, () => ({
  make: (max) => new MemoryMxThrottle(max),
  active: (th, host) => th.active(host),
  // An acquire that has to wait queues itself before its call returns: nothing to wait for.
  waited: async () => {},
}));
