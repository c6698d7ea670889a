//! The windowed fan-out pipe of `tests/perf/bench_fanout.py`, on librdkafka with no Python in the loop.
//!
//! Consumes `--expected` records of `--source`, produces each to the next of `--sinks` (in turn) with its key,
//! value and headers plus the routing headers given, and commits the input offsets once `--window` records are
//! produced or the input is drained, after a flush: the loop of `fanout_pipe(window=...)`. Prints one JSON line:
//! records, seconds from the first record consumed to the last commit, records/s, and CPU µs per record of the
//! loop's thread and of the whole process (librdkafka's own threads included).
//!
//! ```text
//! native_pipe --bootstrap HOST:PORT --source TOPIC --sinks T1,T2,... --expected N --window N
//!     [--every-report] [--consumer NAME=VALUE]... [--producer NAME=VALUE]... [--header NAME=VALUE]...
//!     [--source-header NAME]
//! ```
//!
//! `--every-report` asks for a delivery report per record, counted as the worker counts its windows' reports;
//! without it only failures are reported, as the Python pipe runs.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

const BATCH: u64 = 2_000; // records between two polls of the producer's reports, as the pipe's consume(2000)
const FLUSH_TIMEOUT: Duration = Duration::from_secs(300);

/// Delivery reports, counted (the producer serves them on the loop's thread, in `poll` and `flush`).
#[derive(Default)]
struct Reports {
    delivered: AtomicU64,
    failed: AtomicU64,
}

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let counter = if result.is_ok() {
            &self.delivered
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

struct Args {
    bootstrap: String,
    source: String,
    sinks: Vec<String>,
    expected: u64,
    window: u64,
    every_report: bool,
    consumer: Vec<(String, String)>,
    producer: Vec<(String, String)>,
    headers: Vec<(String, Vec<u8>)>,
    source_header: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        bootstrap: String::new(),
        source: String::new(),
        sinks: Vec::new(),
        expected: 0,
        window: 0,
        every_report: false,
        consumer: Vec::new(),
        producer: Vec::new(),
        headers: Vec::new(),
        source_header: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--every-report" {
            args.every_report = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let pair = || {
            value
                .split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| format!("{flag} takes NAME=VALUE, not {value:?}"))
        };
        match flag.as_str() {
            "--bootstrap" => args.bootstrap = value.clone(),
            "--source" => args.source = value.clone(),
            "--sinks" => args.sinks = value.split(',').map(String::from).collect(),
            "--expected" => {
                args.expected = value.parse().map_err(|e| format!("--expected: {e}"))?
            }
            "--window" => args.window = value.parse().map_err(|e| format!("--window: {e}"))?,
            "--consumer" => args.consumer.push(pair()?),
            "--producer" => args.producer.push(pair()?),
            "--header" => {
                let (k, v) = pair()?;
                args.headers.push((k, v.into_bytes()));
            }
            "--source-header" => args.source_header = Some(value.clone()),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if args.bootstrap.is_empty()
        || args.source.is_empty()
        || args.sinks.is_empty()
        || args.expected == 0
    {
        return Err("--bootstrap, --source, --sinks and --expected are required".into());
    }
    args.window = args.window.max(1);
    Ok(args)
}

fn cpu_seconds(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn config(bootstrap: &str, pairs: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (name, value) in pairs {
        config.set(name, value);
    }
    config
}

fn commit(
    consumer: &BaseConsumer,
    offsets: &HashMap<(String, i32), i64>,
) -> Result<(), KafkaError> {
    let mut list = TopicPartitionList::new();
    for ((topic, partition), offset) in offsets {
        list.add_partition_offset(topic, *partition, Offset::Offset(*offset))?;
    }
    consumer.commit(&list, CommitMode::Sync)
}

/// The same record, sent again while the producer's queue is full (its reports served meanwhile).
fn send<'a>(
    producer: &BaseProducer<Reports>,
    mut record: BaseRecord<'a, [u8], [u8]>,
) -> Result<(), KafkaError> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                producer.poll(Duration::from_millis(50));
                record = back;
            }
            Err((error, _)) => return Err(error),
        }
    }
}

struct Window<'a> {
    consumer: &'a BaseConsumer,
    producer: &'a BaseProducer<Reports>,
    offsets: HashMap<(String, i32), i64>,
    pending: u64,
}

impl Window<'_> {
    /// Flush, then commit the offsets of everything produced (at-least-once: reports before the commit).
    fn close(&mut self) -> Result<(), KafkaError> {
        if self.pending == 0 {
            return Ok(());
        }
        self.producer.flush(FLUSH_TIMEOUT)?;
        commit(self.consumer, &self.offsets)?;
        self.pending = 0;
        Ok(())
    }
}

fn run(args: &Args) -> Result<String, KafkaError> {
    let mut producer_config = config(&args.bootstrap, &args.producer);
    if !args.every_report {
        producer_config.set("delivery.report.only.error", "true");
    }
    let consumer: BaseConsumer = config(&args.bootstrap, &args.consumer).create()?;
    let producer: BaseProducer<Reports> = producer_config.create_with_context(Reports::default())?;
    consumer.subscribe(&[args.source.as_str()])?;
    let mut window = Window {
        consumer: &consumer,
        producer: &producer,
        offsets: HashMap::new(),
        pending: 0,
    };
    let (mut records, mut in_batch) = (0u64, 0u64);
    let mut started: Option<(Instant, f64, f64)> = None;
    let mut ended = Instant::now();
    while records < args.expected {
        let wait = if in_batch == 0 {
            Duration::from_millis(200)
        } else {
            Duration::ZERO
        };
        let message = match consumer.poll(wait) {
            Some(message) => message?,
            None => {
                // drained: the window closes, as the pipe's does on a short batch
                window.close()?;
                ended = Instant::now();
                in_batch = 0;
                continue;
            }
        };
        started.get_or_insert_with(|| {
            let clocks = (
                libc::CLOCK_THREAD_CPUTIME_ID,
                libc::CLOCK_PROCESS_CPUTIME_ID,
            );
            (Instant::now(), cpu_seconds(clocks.0), cpu_seconds(clocks.1))
        });
        let (topic, partition, offset) = (message.topic(), message.partition(), message.offset());
        let mut headers = OwnedHeaders::new_with_capacity(args.headers.len() + 8);
        if let Some(inputs) = message.headers() {
            for header in inputs.iter() {
                headers = headers.insert(header);
            }
        }
        if let Some(name) = &args.source_header {
            let position = format!("{topic}/{partition}/{offset}");
            headers = headers.insert(Header {
                key: name,
                value: Some(position.as_bytes()),
            });
        }
        for (name, value) in &args.headers {
            headers = headers.insert(Header {
                key: name,
                value: Some(value.as_slice()),
            });
        }
        let sink = &args.sinks[(records % args.sinks.len() as u64) as usize];
        let mut record = BaseRecord::to(sink).headers(headers);
        if let Some(value) = message.payload() {
            record = record.payload(value);
        }
        if let Some(key) = message.key() {
            record = record.key(key);
        }
        send(&producer, record)?;
        window
            .offsets
            .insert((topic.to_string(), partition), offset + 1);
        records += 1;
        window.pending += 1;
        in_batch += 1;
        if in_batch == BATCH {
            in_batch = 0;
            producer.poll(Duration::ZERO);
        }
        if window.pending >= args.window || records >= args.expected {
            window.close()?;
            ended = Instant::now();
        }
    }
    let (first, thread0, process0) = started.expect("records were consumed");
    let (thread, process) = (
        cpu_seconds(libc::CLOCK_THREAD_CPUTIME_ID) - thread0,
        cpu_seconds(libc::CLOCK_PROCESS_CPUTIME_ID) - process0,
    );
    let seconds = ended.duration_since(first).as_secs_f64();
    let reports = producer.context();
    consumer.unsubscribe();
    Ok(format!(
        "{{\"records\": {records}, \"seconds\": {seconds:.3}, \"rate\": {:.0}, \"thread_cpu_us\": {:.2}, \
         \"process_cpu_us\": {:.2}, \"delivered\": {}, \"failed\": {}}}",
        records as f64 / seconds,
        thread * 1e6 / records as f64,
        process * 1e6 / records as f64,
        reports.delivered.load(Ordering::Relaxed),
        reports.failed.load(Ordering::Relaxed),
    ))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("native_pipe: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("native_pipe: {error}");
            ExitCode::FAILURE
        }
    }
}
