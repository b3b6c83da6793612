// Charts through Chart.js, loaded only by the pages that draw one (its own chunk, not in the first
// download). Readable without colour: every series of a bar chart has its own fill pattern
// (solid, stripes, dots, cross-hatch...), every line its own dash and point shape, the legend
// names them, and the same numbers sit beside the chart as a table (for screen readers and print).

import { useEffect, useRef } from 'preact/hooks';
import type { Chart as ChartJs } from 'chart.js';
import { Table } from './table.tsx';

export interface Series {
  label: string;
  /** One value per label; null (or NaN) where there is none (a gap in a line, "—" in the table). */
  values: Array<number | null>;
}

export interface ChartProps {
  /** The chart's title: its accessible name and the table's caption. */
  title: string;
  /** The x axis: one label per point (days, verdicts...). */
  labels: string[];
  series: Series[];
  kind?: 'bar' | 'line';
  /** Bars of each label stacked (bar charts). */
  stacked?: boolean;
  /** The y axis's title. */
  yTitle?: string;
  /** How a value reads in the table and tooltips (default: as an integer with separators). */
  format?: (v: number) => string;
}

// Okabe-Ito: told apart by the common colour-vision deficiencies; patterns and dashes add the rest.
const COLOURS = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#D55E00', '#56B4E9', '#000000', '#F0E442'];
const DASHES: number[][] = [[], [6, 4], [2, 3], [10, 3, 2, 3], [1, 5], [12, 6]];
const POINTS = ['circle', 'rect', 'triangle', 'crossRot', 'rectRot', 'star'] as const;

/** A 10x10 tile: series i's colour with its own mark (solid, stripes, dots, grid...). */
function pattern(i: number): CanvasPattern | string {
  const colour = COLOURS[i % COLOURS.length]!;
  const c = document.createElement('canvas');
  c.width = c.height = 10;
  const g = c.getContext('2d');
  if (!g) return colour;
  g.fillStyle = colour;
  g.fillRect(0, 0, 10, 10);
  g.strokeStyle = g.fillStyle = 'rgba(255,255,255,0.85)';
  g.lineWidth = 2;
  const line = (x1: number, y1: number, x2: number, y2: number) => {
    g.beginPath();
    g.moveTo(x1, y1);
    g.lineTo(x2, y2);
    g.stroke();
  };
  switch (i % 6) {
    case 0: // solid
      break;
    case 1: // diagonal stripes
      line(0, 10, 10, 0);
      line(-5, 5, 5, -5);
      line(5, 15, 15, 5);
      break;
    case 2: // dots
      g.beginPath();
      g.arc(5, 5, 2, 0, Math.PI * 2);
      g.fill();
      break;
    case 3: // horizontal lines
      line(0, 5, 10, 5);
      break;
    case 4: // cross-hatch
      line(0, 0, 10, 10);
      line(0, 10, 10, 0);
      break;
    case 5: // vertical lines
      line(5, 0, 5, 10);
      break;
  }
  return g.createPattern(c, 'repeat') ?? colour;
}

const integer = (v: number) => v.toLocaleString('en-US');

let loading: Promise<typeof import('./chart-lib.ts')> | undefined;
/** Chart.js, fetched the first time a chart is drawn. */
const chartJs = () => (loading ??= import('./chart-lib.ts'));

export function Chart({ title, labels, series, kind = 'bar', stacked = false, yTitle, format = integer }: ChartProps) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    let chart: ChartJs | undefined;
    let gone = false;
    void chartJs().then(({ Chart: C }) => {
      if (gone || !canvas.current) return;
      chart = new C(canvas.current, {
        type: kind,
        data: {
          labels,
          datasets: series.map((s, i) =>
            kind === 'bar'
              ? { label: s.label, data: s.values, backgroundColor: pattern(i), borderColor: COLOURS[i % COLOURS.length]!, borderWidth: 1 }
              : {
                  label: s.label,
                  data: s.values,
                  borderColor: COLOURS[i % COLOURS.length]!,
                  backgroundColor: COLOURS[i % COLOURS.length]!,
                  borderDash: DASHES[i % DASHES.length]!,
                  pointStyle: POINTS[i % POINTS.length]!,
                  pointRadius: 4,
                },
          ),
        },
        options: {
          animation: false,
          maintainAspectRatio: false,
          scales: {
            x: { stacked },
            y: { stacked, beginAtZero: true, ...(yTitle && { title: { display: true, text: yTitle } }), ticks: { callback: (v) => format(Number(v)) } },
          },
          plugins: {
            legend: { labels: { usePointStyle: kind === 'line', color: '#111' } },
            tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${format(Number(c.raw))}` } },
          },
        },
      });
    });
    return () => {
      gone = true;
      chart?.destroy();
    };
  }, [JSON.stringify([labels, series, kind, stacked, yTitle])]);
  const empty = labels.length === 0;
  return (
    <figure class="chart">
      {empty ? (
        <p>{title}: nothing in this period.</p>
      ) : (
        <>
          <div class="chart-box">
            <canvas ref={canvas} role="img" aria-label={`${title} (chart; the same figures are in the table below it)`} />
          </div>
          <details>
            <summary>{title}: the figures as a table</summary>
            <Table caption={title} headers={['', ...series.map((s) => s.label)]}>
              {labels.map((l, i) => (
                <tr key={l}>
                  <th scope="row">{l}</th>
                  {series.map((s) => (
                    <td key={s.label}>{s.values[i] === null || Number.isNaN(s.values[i]) ? '—' : format(s.values[i] ?? 0)}</td>
                  ))}
                </tr>
              ))}
            </Table>
          </details>
        </>
      )}
    </figure>
  );
}
