/**
 * Gathers the ends of a runner's jobs into claims. A job's end frees a slot that due work may wait for
 * (a key at its share, a full runner). A claim per end would be one statement per job under load, so
 * ends are gathered: the claimer wakes once `claimRoom` slots were freed since its last claim began, or
 * `windowMillis` after the first of them. Each end is thus followed, within the window, by a claim that
 * sees its slot free: none waits for the poll. The window is real time, as a wake-up is (it must not
 * wait for a test's clock to move).
 */
export class ClaimWindow {
  /**
   * Only while due work may be waiting for a slot: the runner was full, or a key at its share, when it
   * last claimed. Otherwise a job's end leaves nothing behind to claim (at a low rate, a claim per end
   * that finds nothing, and a next-due reading after it).
   */
  roomBound = false
  private freed = 0
  private window: ReturnType<typeof setTimeout> | undefined

  constructor(
    private readonly claimRoom: number,
    private readonly windowMillis: number,
    private readonly wakeUp: () => void
  ) {}

  /** Stops a pending window's timer. */
  close(): void {
    if (this.window !== undefined) clearTimeout(this.window)
    this.window = undefined
  }

  private readonly wakeForEnds = (): void => {
    this.close()
    this.wakeUp()
  }

  /** A job's end gave its slot back. */
  slotFreed(): void {
    if (!this.roomBound) return
    this.freed++
    if (this.freed >= this.claimRoom) this.wakeForEnds()
    else if (this.window === undefined) this.window = setTimeout(this.wakeForEnds, this.windowMillis)
  }

  /** As a claim begins, before it reads the room of each key: it claims for every end so far. */
  claimBegins(): void {
    this.freed = 0
    this.close()
  }
}
