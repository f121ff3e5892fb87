# The vidbatch image: worker, starter, simulator and operator commands (the entrypoint is the CLI).
# Built in two stages: the first compiles dist/ (npm run build: JavaScript and the prebuilt workflow bundle,
# with the dev dependencies); the image holds only the production dependencies, bin/ and dist/, so
# bin/vidbatch.mjs runs the built code (no src/ in the image) with no TypeScript loader.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.ts ./scripts/
COPY src ./src
RUN npm run build

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY --from=build /app/dist ./dist
# /data holds the output root (VIDBATCH_OUT_ROOT=/data/out) and the CSV mount point (/data/batches). It is
# made here and owned by the runtime user, so an empty named volume mounted on /data starts as a copy of it,
# writable by `node`. A bind mount keeps the host's ownership instead: give it to uid 1000 (`node`).
RUN mkdir -p /data/out /data/batches && chown -R node:node /data
USER node
ENTRYPOINT ["node", "bin/vidbatch.mjs"]
CMD ["worker"]
