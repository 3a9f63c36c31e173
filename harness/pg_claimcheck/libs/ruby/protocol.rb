# The worker side of claimcheck's external adapter protocol (docs/contracts.md, section 2, "A library
# adapter is Python or an external worker"), for Ruby: what pg_claimcheck/libs/node/protocol.mjs is for Node.
#
# Every record is one JSON line written to stdout with a single write(2) (IO#syswrite), so a SIGKILL
# loses at most the end of the execution it interrupted, never a start.
require "json"

module Claimcheck
  PROTOCOL = 1

  def self.args
    command, json = ARGV
    [command, JSON.parse(json)]
  end

  def self.emit(record)
    $stdout.syswrite(JSON.generate(record) + "\n")
  end

  # Seconds since the epoch on this host's clock.
  def self.now
    Process.clock_gettime(Process::CLOCK_REALTIME)
  end

  # `feed`: the keys to enqueue, one per line on stdin, as the producer sends them.
  def self.keys
    $stdin.each_line { |line| yield Integer(line) unless line.strip.empty? }
  end

  # Run the subcommand; a failure goes to stderr in one line (the worker's last words) and exits 3.
  def self.run(commands, command)
    main = commands[command]
    raise ArgumentError, "unknown command #{command}: #{commands.keys.join(', ')}" if main.nil?
    exit(main.call || 0)
  rescue SystemExit
    raise
  rescue Exception => e # rubocop:disable Lint/RescueException -- any failure: one line, exit 3
    $stderr.write("#{e.class}: #{e.message}".lines.first.to_s.chomp + "\n")
    exit(3)
  end

  class Recorder
    def initialize(config)
      @config = config
      @rng = Random.new(config["worker"] + 1)
      @runs = 0
    end

    def hello(library, version, extra = {})
      Claimcheck.emit({ event: "hello", protocol: PROTOCOL, library: library, version: version,
                        worker: @config["worker"], pid: Process.pid }.merge(extra))
    end

    # One execution of job `key`: `job` and `attempt` as the library reports them, `claimed_at` the
    # library's own time of the claim (epoch seconds) when it has one.
    def execution(key, job, attempt, claimed_at)
      run = (@runs += 1)
      Claimcheck.emit({ event: "start", run: run, key: key, job: job.to_s, attempt: attempt, t: Claimcheck.now,
                        claimed_at: claimed_at })
      stalled = begin
        File.unlink(@config["stall_flag"])
        true
      rescue SystemCallError
        false
      end
      if stalled
        # The worker's only thread stops, as a blocking call inside a job does: whatever the library
        # does between jobs stops with it.
        Claimcheck.emit({ event: "stall", run: run, key: key, t: Claimcheck.now })
        sleep(@config["stall_s"])
      else
        pause = draw_seconds
        sleep(pause) if pause.positive?
      end
      Claimcheck.emit({ event: "end", run: run, key: key, t: Claimcheck.now })
    end

    private

    def draw_seconds
      work = @config["work"]
      case work["kind"]
      when "fixed" then work["a_ms"] / 1000.0
      when "uniform" then (work["a_ms"] + (work["b_ms"] - work["a_ms"]) * @rng.rand) / 1000.0
      else work["a_ms"].positive? ? -Math.log(1 - @rng.rand) * work["a_ms"] / 1000.0 : 0
      end
    end
  end
end
