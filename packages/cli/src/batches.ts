// Sending a list in requests of a fixed size, a few at a time, for the commands that read a file
// (`svc find --file`, `svc enrich --file`): the answers come back by batch, in input order,
// whatever order the requests finish in. A failed request stops new ones from starting; those in
// flight are awaited (they may be charged, so their answers are kept) and the failure is handed
// back with everything that did come back, so the command can still write the rows it has.

export interface BatchOutcome<R> {
  /** One entry per batch, in order: its answer, or undefined when it failed or never started. */
  answers: Array<R | undefined>;
  /** The first failure, if any. */
  failure?: unknown;
}

/**
 * Runs `send` over `items` cut into batches of `size`, at most `parallel` at once. `onDone` is
 * called with the number of items answered so far after each batch that succeeds.
 */
export async function inBatches<T, R>(items: readonly T[], size: number, parallel: number, send: (batch: T[], index: number) => Promise<R>, onDone?: (answered: number) => void): Promise<BatchOutcome<R>> {
  const batches: T[][] = [];
  for (let i = 0; i < items.length; i += size) batches.push(items.slice(i, i + size));
  const answers: Array<R | undefined> = new Array(batches.length).fill(undefined);
  let next = 0;
  let answered = 0;
  let failed = false;
  let failure: unknown;
  const worker = async (): Promise<void> => {
    while (!failed && next < batches.length) {
      const i = next++;
      try {
        answers[i] = await send(batches[i]!, i);
      } catch (err) {
        if (!failed) failure = err;
        failed = true;
        return;
      }
      answered += batches[i]!.length;
      onDone?.(answered);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, batches.length) }, worker));
  return failed ? { answers, failure } : { answers };
}
