# The vidbatch image: worker, starter, simulator and operator commands (the entrypoint is the CLI).
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY src ./src
COPY tsconfig.json ./
USER node
ENTRYPOINT ["node", "bin/vidbatch.mjs"]
CMD ["worker"]
