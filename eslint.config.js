// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

// Workflow code runs in Temporal's deterministic sandbox: no Node built-ins there, nor in the contract it
// imports.
const nodeBuiltins = builtinModules.flatMap((m) => [m, `node:${m}`]);

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      '.vidbatch/**',
      'out/**',
      'coverage/**',
      'dist/**',
      '.dependency-cruiser.cjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
    },
  },
  {
    files: ['src/workflows/**/*.ts', 'src/contract/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.map((name) => ({
            name,
            message: 'Workflow code must be deterministic: no Node built-ins.',
          })),
        },
      ],
    },
  },
  { files: ['bin/**/*.mjs', 'eslint.config.js'], ...tseslint.configs.disableTypeChecked },
  // The review gallery's page script runs in the browser (inlined into review.html), not in Node.
  {
    files: ['src/review/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'script',
      globals: Object.fromEntries(
        [
          'window',
          'document',
          'localStorage',
          'IntersectionObserver',
          'HTMLElement',
          'Blob',
          'URL',
          'fetch',
          'setTimeout',
          'setInterval',
        ].map((name) => [name, 'readonly']),
      ),
    },
  },
);
