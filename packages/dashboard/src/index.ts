export { dashboardApi, SESSION_COOKIE, SIGN_IN_PER_EMAIL, SIGN_IN_PER_IP, SIGN_IN_WINDOW_MS } from './api.ts';
export type { DashboardApiOptions, DashboardJobs, DashboardCsv } from './options.ts';
export { dashboardPages, ensureDashboardBuilt, CONTENT_SECURITY_POLICY } from './static.ts';
