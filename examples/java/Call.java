// fgemma from Java (org.fgemma over libfgemma_jni.so): one request to a function call, the JSON
// `fgemma call` prints.
//
//   java -Dfgemma.jni.library=/usr/local/lib/libfgemma_jni.so \
//        -cp /usr/local/share/java/fgemma.jar examples/java/Call.java \
//        MODEL.gguf examples/smart_home.json "turn the light on in the kitchen"
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.fgemma.FgemmaException;
import org.fgemma.FunctionCaller;
import org.fgemma.Model;

public class Call {
  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: Call MODEL.gguf CATALOG.json REQUEST");
      System.exit(2);
    }
    String catalog = new String(Files.readAllBytes(Paths.get(args[1])), StandardCharsets.UTF_8);
    try (Model model = new Model(args[0]);
        FunctionCaller caller = model.caller(catalog)) {
      // Bytes as they are: System.out may not be UTF-8.
      System.out.write((caller.call(args[2]) + "\n").getBytes(StandardCharsets.UTF_8));
      System.out.flush();
    } catch (FgemmaException e) {
      System.err.println("fgemma: " + e.getMessage());
      System.exit(1);
    }
  }
}
