package floodmark.window;

import java.util.ArrayList;
import java.util.List;

/** What one move of the operator emitted. {@code accepted}: (record, window) pairs taken into windows. */
public final class Emitted {
  public final List<Pane> panes = new ArrayList<>();
  public final List<LateRecord> late = new ArrayList<>();
  public final List<BadRecord> bad = new ArrayList<>();
  public long accepted;
}
