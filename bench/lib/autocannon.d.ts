// The part of autocannon 8's API the benchmarks use (the package ships no types).

declare module 'autocannon' {
  interface AutocannonOptions {
    url: string;
    method?: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
    headers?: Record<string, string>;
    body?: string;
    connections?: number;
    pipelining?: number;
    /** Seconds. */
    duration?: number;
    /** Seconds before a request counts as timed out. */
    timeout?: number;
    workers?: number;
    renderProgressBar?: boolean;
    renderResultsTable?: boolean;
  }
  interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
    p99_9: number;
    p2_5: number;
    p97_5: number;
  }
  interface AutocannonResult {
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    resets: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    /** Milliseconds. */
    latency: Histogram & { totalCount: number };
    /** Per-second samples; `total` = requests completed, `sent` = requests sent. */
    requests: Histogram & { sent: number };
    throughput: Histogram;
  }
  function autocannon(opts: AutocannonOptions): PromiseLike<AutocannonResult> & { stop(): void };
  export default autocannon;
  export type { AutocannonOptions, AutocannonResult, Histogram };
}
