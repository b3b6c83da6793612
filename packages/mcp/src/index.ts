// Placeholder until the package is built (issue 9).
export {};
