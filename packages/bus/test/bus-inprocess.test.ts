// The Bus conformance suite (bus-conformance.ts) on the embedded adapter, InProcessBus. Its own
// details (pending(), the scheduler, lanes) are in embedded.test.ts.

import t from 'tap';
import { InProcessBus, type DeadLetter } from '../src/index.ts';
import { busConformance, type Adapter } from './bus-conformance.ts';

const adapter: Adapter = {
  name: 'in-process',
  waitMs: 5000,
  async fresh(t, opts = {}) {
    const letters: DeadLetter[] = [];
    const bus = new InProcessBus({ ...opts, deadLetters: { park: async (l) => void letters.push(l) } });
    t.teardown(() => bus.close());
    return { bus, ready: async () => {}, parked: () => letters };
  },
};

busConformance(t, adapter);
