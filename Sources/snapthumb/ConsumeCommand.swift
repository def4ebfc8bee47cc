import ArgumentParser
import Foundation
import Logging
import SnapThumbConfig
import ServiceLifecycle
import SnapThumbCore
import SnapThumbStore
import SnapThumbGoogle
import SnapThumbQueue
import SnapThumbRunner
import SnapThumbS3
import SnapThumbWatch

struct ConsumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consume",
        abstract: "Process uploads announced on an SQS queue by a bucket's event notifications, as a long-running worker.",
        discussion: """
        Receives S3 event notifications (direct, through SNS, or EventBridge 'Object Created' events) from QUEUE_URL with long polling, and processes each object created under --source into the store, through --jobs worker processes. The upload's key is the object key relative to --source's prefix, exactly as 'backfill s3://…' names it. Test events, other events and objects outside --source are deleted with one log line.

        A message is deleted only after its manifest is published, or the upload is a repeat, or it was refused with a code; refused uploads go to the dead-letter queue (--dead-letter-queue, or the queue's redrive policy) with their key, code and message. Transient failures (store or bucket unreachable) leave the message on the queue, to come back after a backoff. A message held longer than half the visibility timeout has it extended; a worker killed with -9 loses nothing.

        SIGTERM/SIGINT: stop receiving, finish jobs in flight within --drain-timeout, release the rest (visible again at once), exit 0. Start-up checks (credentials, the queue, the bucket, the store) fail with exit 2. When the --metrics-file's directory does not exist (no node_exporter on the host), consume warns once and runs without the metrics file. --listen serves GET /healthz (200 while the receive loop turns, 503 once it is stuck past the watchdog interval), /readyz (200 once the start-up checks passed, 503 while draining) and /metrics (the metrics file's contents, in Prometheus' text format).

        A Pub/Sub subscription (gcppubsub://projects/P/subscriptions/S) carries Cloud Storage's notifications instead: OBJECT_FINALIZE is an upload, other events are acknowledged with one log line; the ack deadline is the lease (--visibility-timeout, else the subscription's), and refusals go to --dead-letter-topic (else the subscription's dead-letter policy's topic). Google credentials: PUBSUB_EMULATOR_HOST, GOOGLE_APPLICATION_CREDENTIALS, else the metadata server (docs/google.md); without an HMAC key in AWS_*, the buckets (Cloud Storage's XML API) are reached with the same credentials as bearer tokens. Each upload is read at the generation its notification names and checked against its size and MD5; a generation already replaced or deleted is acknowledged as superseded.

        Credentials, region and endpoints come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL, then the config file's s3 and sqs sections (keys only from the environment). Every option can also be set as SNAPTHUMB_<NAME> (SNAPTHUMB_SOURCE, SNAPTHUMB_DEAD_LETTER_QUEUE, SNAPTHUMB_LISTEN…) or in the --config file's "consume" object ("deadLetterQueue", "listen"…); flags win over the environment, which wins over the file. See docs/fleet.md.
        """
    )

    @Argument(help: ArgumentHelp("The queue's URL, as SQS gives it (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME), or a Pub/Sub subscription carrying Cloud Storage notifications (gcppubsub://projects/PROJECT/subscriptions/NAME).", valueName: "queue-url"))
    var queueURL: String

    @Option(name: .long, help: ArgumentHelp("The uploads: objects created under this bucket prefix. [env SNAPTHUMB_SOURCE]", valueName: "s3://BUCKET/PREFIX"))
    var source: String?

    @Option(name: [.customShort("s"), .long], help: ArgumentHelp(StoreArgument.help + " [env SNAPTHUMB_STORE; config store.path]", valueName: "dir|s3-url"))
    var store: String?

    @Option(name: [.customShort("j"), .long], parsing: .unconditional, help: ArgumentHelp("Images processed at once (worker processes). [default: the number of cores; env SNAPTHUMB_JOBS]", valueName: "n"))
    var jobs: String?

    @Option(name: .long, help: ArgumentHelp("Where refused uploads go. [default: the queue's redrive policy's target; env SNAPTHUMB_DEAD_LETTER_QUEUE]", valueName: "queue-url"))
    var deadLetterQueue: String?

    @Option(name: .long, help: ArgumentHelp("Pub/Sub: the topic refused uploads are published to. [default: the subscription's dead-letter policy's topic; env SNAPTHUMB_DEAD_LETTER_TOPIC]", valueName: "projects/P/topics/T"))
    var deadLetterTopic: String?

    @Option(name: .long, help: ArgumentHelp("How long a received message stays hidden; extended at half of it while working. [default: the queue's VisibilityTimeout]", valueName: "duration"))
    var visibilityTimeout: String?

    @Option(name: .long, help: ArgumentHelp("Per-image time limit; slower images are refused as 'timeout'. [default: 10s]", valueName: "duration"))
    var imageTimeout: String?

    @OptionGroup
    var common: DaemonCommandOptions

    /// The settings after flags, SNAPTHUMB_* variables and defaults (the store also from the config file).
    struct Resolved {
        var source = ""
        var store = ""
        var jobs = ProcessInfo.processInfo.activeProcessorCount
        var deadLetterQueue: String?
        var deadLetterTopic: PubSubTopic?
        var visibilityTimeout: Double?
        var imageTimeout = 10.0
        var drainTimeout = 25.0
        var workerID: String?
        var metricsFile: String?
        var metricsInterval = 5.0
        var listen: ListenAddress?
    }

    func resolve(_ base: ConfigLayers) throws -> Resolved {
        var layers = base
        for (name, value) in [("source", source), ("jobs", jobs), ("dead-letter-queue", deadLetterQueue), ("dead-letter-topic", deadLetterTopic), ("visibility-timeout", visibilityTimeout),
                              ("image-timeout", imageTimeout)] + common.daemon.given {
            if let value { layers.flags[name] = value }
        }
        var r = Resolved()
        /// `--flag`, then `SNAPTHUMB_FLAG`, then the config file's `consume` object (`flagName`).
        func lookup(_ flag: String) -> (String, SettingSource)? {
            let parts = flag.split(separator: "-")
            let json = String(parts[0]) + parts.dropFirst().map { $0.capitalized }.joined()
            return layers.lookup(flag, file: [("consume", json)]).map { ($0.text, $0.source) }
        }
        func duration(_ flag: String, allowZero: Bool = false) throws -> Double? {
            guard let (text, source) = lookup(flag) else { return nil }
            guard let seconds = parseDuration(text), seconds > 0 || allowZero && seconds == 0 else {
                throw SnapError(.config, "\(source) must be a positive duration such as 500ms, 10s, 5m or 2h (got '\(text)')")
            }
            return seconds
        }
        do {
            guard let (source, origin) = lookup("source"), !source.isEmpty else {
                throw SnapError(.config, "no source given: pass --source s3://BUCKET/PREFIX (or set SNAPTHUMB_SOURCE)")
            }
            guard (try? S3Configuration.parseURL(source)) != nil else {
                throw SnapError(.config, "\(origin) must be an s3://BUCKET/PREFIX URL (got '\(source)')")
            }
            r.source = source
            r.store = try StoreOption.resolve(store, base)
            if let (text, source) = lookup("jobs") { r.jobs = try parseCount(text, minimum: 1, source: source) }
            if let (text, _) = lookup("dead-letter-queue"), !text.isEmpty { r.deadLetterQueue = text }
            if let (text, source) = lookup("dead-letter-topic"), !text.isEmpty {
                do { r.deadLetterTopic = try PubSubTopic(name: text) } catch {
                    throw SnapError(.config, "\(source) must be a Pub/Sub topic, projects/PROJECT/topics/NAME (got '\(text)')")
                }
            }
            r.visibilityTimeout = try duration("visibility-timeout")
            r.imageTimeout = try duration("image-timeout") ?? r.imageTimeout
            r.drainTimeout = try duration("drain-timeout", allowZero: true) ?? r.drainTimeout
            if let (text, _) = lookup("worker-id"), !text.isEmpty { r.workerID = text }
            // A missing directory is warned about at start (DaemonRuntime), as watch does.
            if let (text, _) = lookup("metrics-file"), !text.isEmpty { r.metricsFile = text }
            if let (text, source) = lookup("listen"), !text.isEmpty {
                switch ListenAddress.parse(text) {
                case .success(let address): r.listen = address
                case .failure(let error): throw SnapError(.config, "\(source) \(error.description)")
                }
            }
            r.metricsInterval = try duration("metrics-interval") ?? r.metricsInterval
        } catch let error as SnapError { throw ValidationError(error.message) }
        try StoreArgument.validate(r.store)
        return r
    }

    /// A start-up check failed: one sentence on stderr naming what was checked, exit 2.
    private func startupFailure(_ what: String, _ error: any Error) -> ExitCode {
        let message = (error as? SnapError)?.message ?? describe(error)
        printError("consume: \(what): \(message)")
        return ExitCode(2)
    }

    func run() async throws {
        let layers = try common.pipeline.layers()
        let options = try resolve(layers)
        let pipeline = try common.pipeline.pipeline()
        try common.logging.bootstrap(file: layers.file)
        let logger = Logger(label: "snapthumb.consume")
        let runtime = try await DaemonRuntime.start(command: "consume", listen: options.listen, metricsFile: options.metricsFile,
                                                    environment: layers.environment, logger: logger)
        let cloud: CloudSettings
        do { cloud = try CloudSettings.resolve(layers) } catch { throw startupFailure("the cloud settings", error) }

        // Start-up checks, in the order a person would fix them: the queue (and its
        // credentials), the bucket the uploads are read from, the store.
        let queue: any MessageQueue
        var deadLetters: (any DeadLetterSink)?
        var decode: @Sendable (QueueMessage) -> [BucketEvent]? = { S3EventDecoder.decode($0.body) }
        do {
            if let subscription = try PubSubSubscription.parseURL(queueURL) {
                (queue, deadLetters) = try await pubSubQueue(subscription, options: options, cloud: cloud, logger: logger)
                decode = StorageEventDecoder.decode
            } else {
                (queue, deadLetters) = try sqsQueue(options: options, cloud: cloud, logger: logger)
            }
        } catch let error as GoogleError {
            throw startupFailure("the queue", error.snapError)
        } catch {
            throw startupFailure("the queue", error)
        }
        let sources: S3Sources
        let scope: SourceScope
        do {
            sources = try S3Sources(url: options.source, cloud: cloud)
            try sources.client.checkAccess()
            scope = SourceScope(bucket: sources.client.configuration.bucket, prefix: sources.client.configuration.prefix)
        } catch {
            throw startupFailure("--source (where uploads are read)", error)
        }
        let store: any StoreBackend
        let allowUnconditional = try common.store.allowsUnconditionalWrites(layers)
        do {
            store = try StoreLocation.open(options.store, schemes: StoreArgument.schemes,
                                           options: StoreOpenOptions(onConflict: pipeline.settings.onConflict, allowUnconditionalWrites: allowUnconditional,
                                                                     logger: logger, cloud: cloud))
            if let directory = store.directory, access(directory, W_OK) != 0 {
                throw SnapError(.config, "\(directory): the store is not writable by this user")
            }
        } catch {
            throw startupFailure("--store", error)
        }
        if allowUnconditional, store.directory == nil {
            logger.warning("conditional writes are not checked (--allow-unconditional-writes): if this bucket does not honour If-None-Match, a published manifest can be overwritten without a word",
                           metadata: ["snap.store": "\(store.location)"])
        }
        // As backfill and watch: a bucket that accepts an overwrite under the create-only header exits 2
        // before any message is received; the workers are told it was proven.
        try StoreArgument.proveConditionalWrites(store, logger: logger)
        if deadLetters == nil {
            logger.warning("no dead-letter queue (no redrive policy, no --dead-letter-queue or --dead-letter-topic): refused uploads are only logged")
        }

        let identity = WorkerIdentity(id: options.workerID)
        var config = ConsumeConfiguration(jobs: options.jobs, workerID: identity.id)
        config.drainTimeout = options.drainTimeout
        config.imageTimeout = options.imageTimeout
        config.metricsFile = runtime.metricsFile
        config.metricsInterval = options.metricsInterval
        let arguments = try WorkerCommandLine.arguments(settings: pipeline.settings, store: store, reader: sources, jobs: options.jobs, isolated: true)
        let service = ConsumeService(config: config, queue: queue, deadLetters: deadLetters,
                                     scope: scope, decode: decode, workerExecutable: selfExecutable, workerArguments: arguments,
                                     registry: runtime.registry, logger: logger, notifier: runtime.notifier)
        try await runtime.run(service, logger: logger)
    }

    /// An SQS queue: its visibility timeout as the lease, its redrive policy's target (or
    /// --dead-letter-queue) for refusals.
    private func sqsQueue(options: Resolved, cloud: CloudSettings, logger: Logger) throws -> (any MessageQueue, (any DeadLetterSink)?) {
        let client = SQSClient(configuration: try SQSConfiguration(queueURL: queueURL, cloud: cloud), logger: logger)
        let attributes = try client.attributes()
        guard let lease = options.visibilityTimeout ?? attributes["VisibilityTimeout"].flatMap(Double.init), lease >= 1 else {
            throw SnapError(.config, "\(queueURL): the queue has no VisibilityTimeout of at least 1 s; set one, or pass --visibility-timeout")
        }
        var deadLetterURL = options.deadLetterQueue
        if deadLetterURL == nil, let policy = attributes["RedrivePolicy"], let data = policy.data(using: .utf8),
           let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let arn = object["deadLetterTargetArn"] as? String {
            deadLetterURL = try client.queueURL(forARN: arn)
        }
        var deadLetters: SQSDeadLetters?
        if let deadLetterURL {
            _ = try client.attributes(of: deadLetterURL)
            deadLetters = SQSDeadLetters(client: client, queueURL: deadLetterURL)
        }
        return (SQSQueue(client: client, leaseSeconds: lease), deadLetters)
    }

    /// A Pub/Sub subscription (PUBSUB_EMULATOR_HOST, else Google's service with Application
    /// Default Credentials): its ack deadline as the lease (or --visibility-timeout), its
    /// dead-letter policy's topic (or --dead-letter-topic) for refusals.
    private func pubSubQueue(_ subscription: PubSubSubscription, options: Resolved, cloud: CloudSettings,
                             logger: Logger) async throws -> (any MessageQueue, (any DeadLetterSink)?) {
        let client = try PubSubClient.configured(cloud, logger: logger)
        let info = try await client.subscription(subscription)
        let lease = options.visibilityTimeout ?? Double(info.ackDeadlineSeconds)
        guard lease >= 1, lease <= Double(PubSubClient.maxAckDeadline) else {
            throw SnapError(.config, "\(subscription): an ack deadline of \(lease) s; Pub/Sub takes 10 to 600 s")
        }
        let topic = options.deadLetterTopic ?? info.deadLetterTopic
        return (PubSubQueue(client: client, subscription: subscription, leaseSeconds: lease),
                topic.map { PubSubDeadLetters(client: client, topic: $0) })
    }
}
