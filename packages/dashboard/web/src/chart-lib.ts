// Chart.js with only what the dashboard's charts draw (bars, lines, two axes, legend, tooltips):
// imported statically here so the bundler drops the rest, and loaded by chart.tsx on demand.

import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, LineController, LineElement, PointElement, Tooltip } from 'chart.js';

Chart.register(BarController, BarElement, LineController, LineElement, PointElement, CategoryScale, LinearScale, Legend, Tooltip);

export { Chart };
