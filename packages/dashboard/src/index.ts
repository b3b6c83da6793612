export { dashboardApi, SESSION_COOKIE, SIGN_IN_PER_EMAIL, SIGN_IN_PER_IP, SIGN_IN_WINDOW_MS, type DashboardApiOptions, type DashboardJobs, type DashboardCsv } from './api.ts';
export { dashboardPages, ensureDashboardBuilt, CONTENT_SECURITY_POLICY } from './static.ts';
