// Types of kflame/register (register.js): preloading it profiles the whole
// run (node -r kflame/register app.js). Under mocha, when it profiles, it
// exports the root hooks that label each test's samples with its name.

export declare const mochaHooks:
  | { beforeEach (this: { currentTest?: unknown }): void; afterEach (this: { currentTest?: unknown }): void }
  | undefined
