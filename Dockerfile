# The ledger service image: `ledger consume` by default; `ledger migrate`, `ledger publish`,
# `ledger replay` and `ledger verify` with another command.
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY engine ./engine
COPY ledger ./ledger
COPY consumers ./consumers
COPY api ./api
COPY devstack ./devstack
COPY cli ./cli
# A regular install, as from a wheel: the migrations and the demo corpus ship inside the packages.
# The sources are removed afterwards so that nothing can be found beside them by accident.
RUN pip install . && rm -rf engine ledger consumers api devstack cli build ./*.egg-info \
    && useradd --system --uid 10001 ledger
USER ledger
EXPOSE 9108
HEALTHCHECK --interval=15s --timeout=5s --retries=5 CMD ["ledger", "health"]
ENTRYPOINT ["ledger"]
CMD ["consume", "--metrics-port", "9108"]
