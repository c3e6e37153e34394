public import CouchAPI
import HTTPTypes
import Hummingbird
import JSON
import Projections
public import Replication

extension CouchFeature {
  /// The replicator over CouchDB's HTTP API, on the Replication module's jobs:
  /// - `POST /_replicate` (any signed-in user), one-shot or continuous, and its `cancel`;
  /// - `GET /_scheduler/jobs[/{id}]` and `GET /_scheduler/docs[/_replicator[/{docid}]]`
  ///   (server administrators);
  /// - the `_replicator` database, when the data directory knows it
  ///   (`SystemDatabase.replicator`): its documents' jobs run beside the server
  ///   (``CouchServer/services``), each document owned by its writer and shown to other users
  ///   without credentials (``ReplicatorOwnership``);
  /// - its jobs in `/_active_tasks`, `/_node/{node}/_prometheus` and the read-only
  ///   `[replicator]` section of `/_node/{node}/_config`.
  ///
  /// Each server made with it keeps its own jobs (``ServerReplications``, its
  /// ``CouchServer/featureState(_:)``).
  public static func replicator(_ options: ReplicatorSchedulerOptions = .init()) -> CouchFeature {
    CouchFeature(
      name: "replicator",
      perServer: { setup in ServerReplications(setup, options: options).instance })
  }
}

/// The replications of one server: the jobs started with `POST /_replicate` and by its
/// `_replicator` documents.
public struct ServerReplications: Sendable {
  /// Every job, whoever started it.
  public let jobs: ReplicationJobs
  /// The jobs of the `_replicator` database, when the data directory has one.
  public let documents: ReplicatorDocuments
  public let options: ReplicatorSchedulerOptions

  init(_ setup: CouchFeature.Setup, options: ReplicatorSchedulerOptions) {
    self.options = options
    jobs = ReplicationJobs(
      maxHistory: options.maxHistory, healthThreshold: options.healthThreshold)
    documents = ReplicatorDocuments(
      data: setup.dataDirectory, jobs: jobs, options: options, logger: setup.logger)
  }

  var instance: CouchFeature.Instance {
    let jobs = self.jobs
    let options = self.options
    return CouchFeature.Instance(
      serverEndpoints: [
        ServerEndpoint(["_replicate"], methods: [.post], role: .signedIn) { r in
          try await self.replicate(r)
        },
        ServerEndpoint(["_scheduler", .rest], role: .serverAdmin) { r in
          try await self.scheduler(r)
        },
      ],
      systemDatabases: [policy],
      activeTasks: { jobs.activeTasks().arrayValue ?? [] },
      metrics: {
        let counts = jobs.counts
        return [
          PrometheusMetric(
            "wikilog_replication_jobs", "gauge", "replication jobs", [("", counts.jobs)]),
          PrometheusMetric(
            "wikilog_replication_jobs_running", "gauge", "replication jobs running now",
            [("", counts.running)]),
        ]
      },
      configuration: [
        "replicator": [
          "max_jobs": { String(options.maxJobs) },
          "max_churn": { String(options.maxChurn) },
          "max_history": { String(options.maxHistory) },
          // Jobs start when they are due, without CouchDB's random delay.
          "startup_jitter": { "0" },
        ]
      ],
      services: documents.isEnabled ? [documents.service] : [],
      state: self)
  }

  /// `/_scheduler/jobs[/{id}]`, `/_scheduler/docs`, `/_scheduler/docs/_replicator[/{docid}]`
  /// (other replicator databases, `{prefix}/_replicator`, do not exist here).
  func scheduler(_ r: ServerRequest) async throws -> Response {
    let rest = r.rest
    if rest.first == "jobs" && rest.count <= 2 {
      let listed = try jobs.schedulerJobs(
        rest.dropFirst().first, skip: try r.query.int("skip") ?? 0,
        limit: try r.query.int("limit") ?? 100)
      return CouchResponse.json(listed, includeBody: !r.head)
    }
    guard rest.first == "docs" else { throw CouchError.notFound() }
    let id: String?
    switch rest.count {
    case 1: id = nil
    case 2 where rest[1] == "_replicator": id = nil
    case 3 where rest[1] == "_replicator": id = rest[2]
    default: throw CouchError.badRequest("Invalid path")
    }
    return CouchResponse.json(try await schedulerDocs(id, r), includeBody: !r.head)
  }
}

extension CouchServerOptions {
  /// Serves the replicator with `options`: ``CouchAPI/CouchFeature/replicator(_:)`` in
  /// ``features``, in place of one there.
  public mutating func useReplicator(_ options: ReplicatorSchedulerOptions = .init()) {
    features.removeAll { $0.name == "replicator" }
    features.append(.replicator(options))
  }
}
