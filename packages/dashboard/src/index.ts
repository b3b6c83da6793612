export { dashboardApi, issueLink, setupUrl, SESSION_COOKIE, SIGN_IN_PER_EMAIL, SIGN_IN_PER_IP, SIGN_IN_WINDOW_MS, OWNER_LINK_MS, INVITE_LINK_MS, type DashboardApiOptions } from './api.ts';
