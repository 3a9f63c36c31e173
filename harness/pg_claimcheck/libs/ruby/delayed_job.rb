# delayed_job (its ActiveRecord backend) under claimcheck's ledger: its own table (the migration its
# generator writes), its own enqueue (Delayed::Job.enqueue), its own worker loop (Delayed::Worker#start)
# with a job that records each execution. See pg_claimcheck/libs/delayed_job.py for what it promises.
require_relative "protocol"
require "active_record"
require "delayed_job"
require "delayed_job_active_record"
require "logger"
require "cgi"

command, config = Claimcheck.args
o = config["options"]
# The run's database, read from the URL into ActiveRecord's hash form: ActiveRecord's own URL parser
# refuses a socket directory as the host (the embedded server's), which the URL carries percent-encoded.
# libpq reads the password from PGPASSWORD, as every claimcheck script gets it.
url = %r{\Apostgres(?:ql)?://(?:([^@/]*)@)?([^:/?]*)(?::(\d+))?/([^?]*)(?:\?(.*))?\z}.match(config["dsn"]) or
  abort("claimcheck: cannot read the run's DSN")
db = { adapter: "postgresql", host: CGI.unescape(url[2]), database: CGI.unescape(url[4]) }
db[:username] = CGI.unescape(url[1]) if url[1] && !url[1].empty?
db[:port] = url[3].to_i if url[3]
CGI.parse(url[5] || "").each { |key, values| db[key.to_sym] = values.first }
ActiveRecord::Base.establish_connection(db)
ActiveRecord::Base.logger = nil
Delayed::Worker.logger = Logger.new($stderr, level: Logger::WARN)
Delayed::Worker.sleep_delay = o["sleep_delay_s"]
Delayed::Worker.max_attempts = o["max_attempts"]
Delayed::Worker.destroy_failed_jobs = false # keep a job that failed for good (failed_at), for the count
Delayed::Worker.max_run_time = config["faults"] ? o["faults_max_run_time_s"] : o["max_run_time_s"]

# The job: a Struct, as delayed_job's README writes them; `before` is its hook with the job's row.
ClaimcheckJob = Struct.new(:key) do
  def before(job)
    @row = job
  end

  def perform
    locked = @row.locked_at && @row.locked_at.to_f
    $claimcheck_recorder.execution(key, @row.id, @row.attempts + 1, locked)
  end
end

# The generator's migration (lib/generators/delayed_job/templates/migration.rb), as a user runs it.
def install(_config, _o)
  ActiveRecord::Schema.verbose = false
  ActiveRecord::Schema.define do
    create_table :delayed_jobs do |table|
      table.integer :priority, default: 0, null: false
      table.integer :attempts, default: 0, null: false
      table.text :handler, null: false
      table.text :last_error
      table.datetime :run_at
      table.datetime :locked_at
      table.datetime :failed_at
      table.string :locked_by
      table.string :queue
      table.timestamps null: true
    end
    add_index :delayed_jobs, [:priority, :run_at], name: "delayed_jobs_priority"
  end
  0
end

def enqueue(config, o)
  config["first"].step(config["last"], o["enqueue_batch"]) do |first|
    last = [first + o["enqueue_batch"] - 1, config["last"]].min
    ActiveRecord::Base.transaction { (first..last).each { |key| Delayed::Job.enqueue(ClaimcheckJob.new(key)) } }
  end
  Claimcheck.emit({ event: "enqueued", count: config["last"] - config["first"] + 1 })
  0
end

def feed(_config, _o)
  Delayed::Job.connection # connected: the schedule may begin
  Claimcheck.emit({ event: "ready" })
  Claimcheck.keys do |key|
    job = Delayed::Job.enqueue(ClaimcheckJob.new(key))
    Claimcheck.emit({ event: "enqueued", key: key, job: job.id.to_s })
  end
  0
end

def work(config, _o)
  $claimcheck_recorder = Claimcheck::Recorder.new(config)
  worker = Delayed::Worker.new(quiet: true)
  version = Gem.loaded_specs["delayed_job_active_record"]&.version&.to_s || "unknown"
  $claimcheck_recorder.hello("delayed_job", version, { library_worker: worker.name,
                                                       delayed_job: Gem.loaded_specs["delayed_job"]&.version&.to_s })
  worker.start # traps TERM and INT: it finishes the job in hand, then returns
  0
end

Claimcheck.run({ "install" => -> { install(config, o) }, "enqueue" => -> { enqueue(config, o) },
                 "feed" => -> { feed(config, o) }, "work" => -> { work(config, o) } }, command)
