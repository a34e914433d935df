# Static Raven on a distroless base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY pkg ./pkg
COPY internal ./internal
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /raven ./cmd/raven

FROM gcr.io/distroless/static:nonroot
COPY --from=build /raven /raven
USER 65532:65532
ENTRYPOINT ["/raven"]
